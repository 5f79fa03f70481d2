# RaftConnect node image: `python manage.py runnode` (see docker-compose.yml and README "Deploy").
# The same image runs the Spark master and worker of the compose deployment, so that Spark's Python
# workers have the driver's Python (3.11), PySpark, pyarrow, confluent-kafka and this project.
FROM python:3.11-slim-bookworm

# Spark 4 (PySpark's JVM) needs Java 17+ (bookworm has openjdk-17); procps gives Spark's scripts `ps`.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPARK_CONF_DIR=/app/deploy/spark

WORKDIR /app
COPY requirements.txt ./
RUN pip install -r requirements.txt
COPY . .
RUN pip install --no-deps . \
 && pip install --no-deps ./plugins/raftconnect-redis-store \
 && useradd --system --uid 10001 --home-dir /app raftconnect \
 && mkdir -p /var/lib/raftconnect /data \
 && chown raftconnect /var/lib/raftconnect /data
USER raftconnect

EXPOSE 8083 7001
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=6 \
  CMD ["python", "-c", "import os,sys,urllib.request; sys.exit(urllib.request.urlopen('http://%s/health' % os.environ.get('RAFTCONNECT_REST_ADDRESS', '127.0.0.1:8083'), timeout=2).status != 200)"]
CMD ["python", "manage.py", "runnode", "--data-dir", "/var/lib/raftconnect"]
