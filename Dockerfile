# One image for every project service of docker-compose.yml (web, worker, beat, generator, pipeline,
# spark-master, spark-worker). Not built on the development machines, which have no Docker engine.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir -e '.[postgres]'
# Settings come from the environment at run time (docker-compose.yml reads .env), the key and the
# passwords from the files compose mounts at /run/secrets/ (*_FILE); nothing secret is baked into the
# image. The web service runs gunicorn, never `manage.py runserver`.
ENV PYSPARK_PYTHON=/usr/local/bin/python DJANGO_SETTINGS_MODULE=webapp.settings
