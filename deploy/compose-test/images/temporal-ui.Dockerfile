# Stand-in for temporalio/ui at the version the dev stack embeds
# (github.com/temporalio/ui-server/v2, its Dockerfile's ui-server stage):
# ui-server built from the module's cmd/server, its config/docker.yaml
# template and docker/start-ui-server.sh, bash, user temporal (uid 1000),
# workdir /home/ui-server. Not here: dockerize, which the start script
# runs only for the old config-template.yaml mount.
FROM octflow-test/alpine-like:1
WORKDIR /home/ui-server
COPY --chown=1000:1000 ui-server ./ui-server
COPY --chown=1000:1000 docker.yaml ./config/docker.yaml
COPY --chown=1000:1000 start-ui-server.sh ./start-ui-server.sh
USER temporal
EXPOSE 8080
ENTRYPOINT ["./start-ui-server.sh"]
