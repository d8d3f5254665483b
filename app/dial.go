package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"

	"octflow/lifecycle"
)

// DialOptions say how a process reaches Temporal.
type DialOptions struct {
	HostPort, Namespace, Identity string
	Logger                        *zap.Logger
	// Metrics may be nil.
	Metrics client.MetricsHandler
	// Converters are the data and failure converters (which seal
	// payloads when encryption is on); zero: Temporal's defaults.
	Converters lifecycle.Converters
	// TLS, when set, secures the connection (and, with a client
	// certificate, authenticates it: mTLS).
	TLS *tls.Config
	// Compression is "gzip", "none", or "auto" or empty: none where
	// HostPort is a loopback address (the bytes never leave the machine,
	// and gzip cost the embedded stack a few per cent of its CPU, on
	// both ends of every call), gzip elsewhere (the SDK's default).
	Compression string
	// Interceptors wrap every call the client makes to Temporal (e.g.
	// for tracing; the tests inject faults with them).
	Interceptors []interceptor.ClientInterceptor
}

// compression is the SDK's setting for o.Compression.
func (o DialOptions) compression() client.GrpcCompression {
	switch o.Compression {
	case "gzip":
		return &client.GrpcCompressionGzip{}
	case "none":
		return &client.GrpcCompressionNone{}
	}
	host, _, err := net.SplitHostPort(o.HostPort)
	if err != nil {
		host = o.HostPort
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return &client.GrpcCompressionNone{}
	}
	return &client.GrpcCompressionGzip{}
}

// target is the gRPC target for HostPort: passthrough, so that the
// system's resolver looks the name up at each connection, as it does for
// every other client. gRPC's own DNS resolver first asks for
// _grpclb._tcp SRV records (the grpclb balancer is linked in with the
// embedded Temporal server), and Docker's DNS leaves a name it does not
// know unanswered on an internal network: a GPU node that reaches
// Temporal only through one waited that lookup out on every dial, and
// never connected. A target that names its scheme (dns:///…, unix:…) is
// kept as it is.
func (o DialOptions) target() string {
	if strings.Contains(o.HostPort, ":///") || strings.HasPrefix(o.HostPort, "unix:") {
		return o.HostPort
	}
	return "passthrough:///" + o.HostPort
}

// Dial connects to Temporal, waiting up to a minute for it to answer.
func Dial(ctx context.Context, o DialOptions) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var lastErr error
	for {
		c, err := client.DialContext(ctx, client.Options{
			HostPort:          o.target(),
			Namespace:         o.Namespace,
			Identity:          o.Identity,
			Logger:            newSDKLogger(o.Logger),
			MetricsHandler:    o.Metrics,
			DataConverter:     o.Converters.Data,
			FailureConverter:  o.Converters.Failure,
			ConnectionOptions: client.ConnectionOptions{TLS: o.TLS, GrpcCompression: o.compression()},
			Interceptors:      o.Interceptors,
		})
		if err == nil {
			return c, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial temporal at %s: %w", o.HostPort, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// newSDKLogger adapts zap to the Temporal SDK's logger.
func newSDKLogger(z *zap.Logger) sdklog.Logger {
	return sdkLogger{z.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type sdkLogger struct{ s *zap.SugaredLogger }

func (l sdkLogger) Debug(msg string, kv ...any) { l.s.Debugw(msg, kv...) }
func (l sdkLogger) Info(msg string, kv ...any)  { l.s.Infow(msg, kv...) }
func (l sdkLogger) Warn(msg string, kv ...any)  { l.s.Warnw(msg, kv...) }
func (l sdkLogger) Error(msg string, kv ...any) { l.s.Errorw(msg, kv...) }
