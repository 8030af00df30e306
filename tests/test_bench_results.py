"""``benchmarks.run_all --merge``: a rerun of some benchmarks replaces only their parts of results.md."""

from __future__ import annotations

from benchmarks.common import Report, Result
from benchmarks.run_all import merge, side_by_side

OLD = """# kag benchmark results

Last run: 2026-12-05 21:14:42 UTC, 27.1 min, by `make bench` (`scripts/bench.sh`). Goals met: 1 of 2.

Machine: nproc: `2`.

## Summary

| benchmark | metric | kag | baseline | ratio | goal | met |
| --- | --- | ---: | ---: | ---: | --- | :---: |
| BM25 | query | 0.012 ms | – | – | >= 10x faster | yes |
| training | old accuracy | 0.5 share | – | – | >= 0.70 | **no** |
| vector | scan | 1 ms | – | – | – | – |

## Details

### BM25

bm25 table

### Training programs

old training table

### Vector

vector table
"""


def test_merge_replaces_the_rerun_benchmarks_parts_and_keeps_the_rest() -> None:
    training = Report(
        "Training programs", [Result("training", "new accuracy", 0.75, "share", goal=">= 0.70", met=True)]
    )
    dspy = Report("DSPy", [Result("dspy", "dspy accuracy", 0.1, "share")], notes=["dspy note"])
    text = merge(OLD, [training, dspy], "2026-12-07 01:00:00 UTC", 90.0)
    assert "old accuracy" not in text and "old training table" not in text
    assert "bm25 table" in text and "vector table" in text and "| BM25 | query |" in text
    summary = text.split("## Details")[0]
    # the rerun's rows together, where the first of the rows they replace was
    assert summary.index("| BM25 |") < summary.index("new accuracy") < summary.index("dspy accuracy")
    assert summary.index("dspy accuracy") < summary.index("| vector | scan")
    details = text.split("## Details")[1]
    assert details.index("### BM25") < details.index("### Training programs") < details.index("### Vector")
    assert details.index("### Vector") < details.index("### DSPy") and "dspy note" in details
    assert "Goals met: 2 of 2." in side_by_side(text)  # recounted over the whole summary
    assert "Rerun and merged on 2026-12-07 01:00:00 UTC (1.5 min): Training programs, DSPy." in text


def test_the_side_by_side_row_compares_kag_and_dspy_from_whichever_run_wrote_them() -> None:
    kag = [
        Result("training", "SmolLM2-135M exact answers, untrained", 0.02, "share"),
        Result("training", "SmolLM2-135M exact answers, KNNFewShot(k=1), LexicalLM teacher", 0.71, "share"),
        Result("training", "SmolLM2-135M exact answers, BootstrapFewShot, LexicalLM teacher", 0.4, "share"),
    ]
    dspy = [
        Result("dspy", "constrained, untrained: exact answers, test split", 0.6, "share"),  # not a trained row
        Result("dspy", "constrained, KNNFewShot(k=1): exact answers, test split", 0.2, "share"),
        Result("dspy", "as-it-comes, KNNFewShot(k=1): exact answers, test split", 0.1, "share"),
    ]
    text = merge(OLD, [Report("Training programs", kag)], "now", 1.0)
    assert "| side-by-side |" not in side_by_side(text)  # DSPy not measured yet
    text = side_by_side(merge(text, [Report("DSPy", dspy)], "later", 1.0))
    row = next(line for line in text.splitlines() if line.startswith("| side-by-side |"))
    assert "| 0.51 share |" in row and "kag 0.71; DSPy under the grammar 0.20, as it comes 0.10" in row
    assert row.endswith("| >= 0.20 | yes |") and "Goals met: 2 of 2." in text  # BM25's and this one
    assert side_by_side(text).count("| side-by-side |") == 1  # derived again, not added twice
