#!/bin/sh
# CGI of the compose test's webhook receiver (alert-sink.Dockerfile):
# POST appends the body (Alertmanager's webhook JSON) as one line; GET
# returns every line so far.
printf 'Content-Type: application/json\r\n\r\n'
if [ "$REQUEST_METHOD" = POST ]; then
	{
		head -c "${CONTENT_LENGTH:-0}" | tr -d '\n'
		echo
	} >>/var/alerts/received.jsonl
	echo '{}'
else
	cat /var/alerts/received.jsonl 2>/dev/null || true
fi
