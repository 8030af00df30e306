# The kag HTTP service (used by docker-compose.yml).   docker build -t kag .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Only what the package build needs (see .dockerignore).
COPY pyproject.toml README.md ./
COPY kag ./kag

RUN pip install . \
    && useradd --create-home --uid 10001 kag

USER kag
EXPOSE 8000

# NEO4J_URI / NEO4J_USER / NEO4J_PASSWORD / NEO4J_DATABASE come from the environment.
CMD ["kag", "serve", "--host", "0.0.0.0"]
