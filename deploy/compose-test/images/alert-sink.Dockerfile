# The compose test's webhook receiver: busybox httpd with one CGI script
# (alert-sink-hook.sh) that appends every POSTed body to a file and
# answers a GET with all of them, one JSON document a line.
FROM octflow-test/alpine-like:1
COPY alert-sink-hook.sh /www/cgi-bin/hook
RUN mkdir -p /var/alerts && chown nobody:nobody /var/alerts
USER nobody
EXPOSE 8080
CMD ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"]
