"""Task runtime: the worker agent (Celery), WorkerTask loops, Spark session, converters."""
