"""Tests of kag.rag: loaders, URL safety, splitting, BM25, ranking, filters, embedders."""
