# RaftConnect node image: `python manage.py runnode` (see docker-compose.yml and README "Deploy").
# The same image runs the Spark master and worker of the compose deployment, so that Spark's Python
# workers have the driver's Python (3.11), PySpark, pyarrow, confluent-kafka and this project.

# The browser console (frontend/), built from its committed lock file into /src/webapp/console/dist (Vite's
# outDir, package data of the raftconnect package); every node serves it at /console/.
FROM node:20-bookworm-slim AS console
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

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
# before `pip install .`: the package carries the console (its build backend refuses to build without it)
COPY --from=console /src/webapp/console/dist ./webapp/console/dist
RUN pip install --no-deps . \
 && pip install --no-deps ./plugins/raftconnect-redis-store \
 && useradd --system --uid 10001 --home-dir /app raftconnect \
 && mkdir -p /var/lib/raftconnect /data \
 && chown raftconnect /var/lib/raftconnect /data
USER raftconnect

EXPOSE 8083 7001
# GET /health on the node's REST address (RAFTCONNECT_REST_ADDRESS, else <hostname>:8083).
HEALTHCHECK --interval=10s --timeout=3s --start-period=90s --retries=6 \
  CMD ["python", "-c", "import os,socket,sys,urllib.request; a=os.environ.get('RAFTCONNECT_REST_ADDRESS') or socket.gethostname()+':8083'; sys.exit(urllib.request.urlopen('http://%s/health' % a, timeout=2).status != 200)"]
# One node; set its flags or RAFTCONNECT_* variables (README "Running a node"), e.g.
# RAFTCONNECT_REST_ADDRESS=<hostname>:8083 so that the API is reachable from outside the container.
CMD ["python", "manage.py", "runnode", "--data-dir", "/var/lib/raftconnect"]
