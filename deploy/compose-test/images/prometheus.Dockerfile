# Stand-in for prom/prometheus (a busybox image): Debian's prometheus
# and promtool (the versions of the machine's package, named in the
# test's output) at /bin, the official layout: config in
# /etc/prometheus, data in /prometheus owned by nobody, entrypoint
# /bin/prometheus.
FROM octflow-test/alpine-like:1
COPY prometheus promtool /bin/
COPY prometheus.yml /etc/prometheus/prometheus.yml
RUN mkdir -p /prometheus && chown -R nobody:nobody /etc/prometheus /prometheus
USER nobody
EXPOSE 9090
VOLUME ["/prometheus"]
WORKDIR /prometheus
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
