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

# metrics: GET /metrics (prometheus_client); fast: the Neo4j driver's Rust packer.
# The service runs as an unprivileged user without a login shell or home.
RUN pip install ".[metrics,fast]" \
    && groupadd --system --gid 10001 kag \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin kag

USER 10001:10001
EXPOSE 8000

# Healthy only when /health answers 200: the graph backend is reachable (503 otherwise).
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=5 \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health', timeout=4)"]

# NEO4J_URI / NEO4J_USERNAME / NEO4J_PASSWORD / NEO4J_DATABASE and KAG_API_KEYS come from the environment;
# a non-loopback bind without API keys refuses to start (exit code 2).
CMD ["kag", "serve", "--host", "0.0.0.0", "--port", "8000"]
