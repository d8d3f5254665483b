# Stand-in for prom/alertmanager (a busybox image): Debian's
# prometheus-alertmanager and amtool (the versions of the machine's
# package, named in the test's output) at /bin, the official layout:
# a default config in /etc/alertmanager, data in /alertmanager owned by
# nobody, entrypoint /bin/alertmanager. Debian's build reads its
# notification templates from /usr/share/prometheus/alertmanager (the
# official binary has them built in). It takes the shipped flags,
# --web.config.file (HTTPS, deploy/prometheus/web.yml) among them
# (Debian bookworm's 0.25.0 does).
FROM octflow-test/alpine-like:1
COPY alertmanager amtool /bin/
COPY share/ /usr/share/prometheus/alertmanager/
COPY alertmanager.yml /etc/alertmanager/alertmanager.yml
RUN mkdir -p /alertmanager && chown -R nobody:nobody /etc/alertmanager /alertmanager
USER nobody
EXPOSE 9093
VOLUME ["/alertmanager"]
WORKDIR /alertmanager
ENTRYPOINT ["/bin/alertmanager"]
CMD ["--config.file=/etc/alertmanager/alertmanager.yml", "--storage.path=/alertmanager"]
