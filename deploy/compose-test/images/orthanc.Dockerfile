# The compose test's PACS: Debian bookworm's Orthanc (1.10) with its
# DICOMweb plugin, as a hospital's archive the worker exports to
# (compose.test.yml, pacs-orthanc). It serves plain HTTP on 8042 to a
# network of its own; the stack reaches it only through its TLS front
# (pacs, stunnel4: Debian's Orthanc 1.10 cannot serve TLS itself, its
# civetweb failing the handshake with OpenSSL 3). Its registered users
# come from /etc/orthanc/credentials.json, which the test mounts as a
# secret. The campus's router and device (compose.test.yml: router,
# device) run this image too: DCMTK (storescu, and findscu for the
# recipe's wake-up) comes as orthanc's dependency; curl reads the
# router's REST API from inside its container.
FROM octflow-test/debian:bookworm
# orthanc is uid and gid 10002, which the test gives its secret to; no
# service is started inside the build (policy-rc.d).
RUN groupadd --system --gid 10002 orthanc \
 && useradd --system --uid 10002 --gid orthanc --home-dir /var/lib/orthanc --no-create-home --shell /usr/sbin/nologin orthanc \
 && printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends orthanc orthanc-dicomweb curl \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d /etc/orthanc/serve-folders.json /etc/orthanc/worklists.json \
 && mkdir -p /var/lib/orthanc/db && chown -R orthanc:orthanc /var/lib/orthanc
COPY orthanc.json /etc/orthanc/orthanc.json
USER orthanc
EXPOSE 8042
CMD ["Orthanc", "/etc/orthanc/"]
