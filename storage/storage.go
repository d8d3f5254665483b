// Package storage is octflow's object store: one bucket on any S3
// endpoint (the embedded dev gateway, versitygw, MinIO, Ceph RGW, a cloud
// bucket) reached through minio-go. It knows keys and bytes, not exams.
package storage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config locates the bucket.
type Config struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Bucket    string
	UseTLS    bool
	Region    string // default us-east-1
	// CAFile holds the endpoint's CA certificates (PEM) when they are not
	// the system's.
	CAFile string
}

// Store reads and writes objects in one bucket.
type Store struct {
	client    *minio.Client
	transport *http.Transport
	bucket    string
	counts    counters
}

// Op names a kind of request a Store makes of its endpoint.
type Op string

// The requests a Store makes.
const (
	OpGet    Op = "get"
	OpPut    Op = "put"
	OpStat   Op = "stat"
	OpList   Op = "list"
	OpDelete Op = "delete"
	OpPing   Op = "ping"
)

// Ops are every Op, in a stable order.
var Ops = [...]Op{OpGet, OpPut, OpStat, OpList, OpDelete, OpPing}

// Counts is what a Store has asked of its endpoint since it was opened:
// requests by kind (a listing counts once, however many pages it took)
// and the bytes of the objects it read and wrote.
type Counts struct {
	Requests     map[Op]int64
	BytesRead    int64
	BytesWritten int64
}

type counters struct {
	requests      [len(Ops)]atomic.Int64 // by index in Ops
	read, written atomic.Int64
}

func (c *counters) request(op Op) {
	for i, o := range Ops {
		if o == op {
			c.requests[i].Add(1)
			return
		}
	}
}

// Counts returns what the store has asked of its endpoint so far.
func (s *Store) Counts() Counts {
	c := Counts{Requests: make(map[Op]int64, len(Ops)), BytesRead: s.counts.read.Load(), BytesWritten: s.counts.written.Load()}
	for i, op := range Ops {
		c.Requests[op] = s.counts.requests[i].Load()
	}
	return c
}

// idleConnsPerEndpoint is how many connections to the endpoint a store
// keeps open between requests (minio-go's default is 16).
const idleConnsPerEndpoint = 64

// ErrNotFound is returned for a key that does not exist.
var ErrNotFound = errors.New("object not found")

// Open connects to the endpoint and creates the bucket if it is missing.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	t, err := minio.DefaultTransport(cfg.UseTLS)
	if err != nil {
		return nil, fmt.Errorf("s3 transport: %w", err)
	}
	// A process's stages and uploads reach the endpoint side by side;
	// a connection they cannot keep idle is closed after one request and
	// the next one dials (and with TLS, shakes hands) again.
	t.MaxIdleConnsPerHost = idleConnsPerEndpoint
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("s3 CA: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("s3 CA: %s holds no PEM certificate", cfg.CAFile)
		}
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	}
	opts := &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.UseTLS,
		Region:    cfg.Region,
		Transport: t,
	}
	client, err := minio.New(cfg.Endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", cfg.Endpoint, err)
	}
	s := &Store{client: client, transport: t, bucket: cfg.Bucket}
	if err := s.ensureBucket(ctx, cfg.Region); err != nil {
		// OpenRetrying opens again: leave no connections behind.
		s.Close()
		return nil, err
	}
	return s, nil
}

// ensureBucket creates the store's bucket if it is missing.
func (s *Store) ensureBucket(ctx context.Context, region string) error {
	exists, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("check bucket %q: %w", s.bucket, err)
	}
	if !exists {
		if err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region}); err != nil {
			return fmt.Errorf("create bucket %q: %w", s.bucket, err)
		}
	}
	return nil
}

// Close closes the connections the store keeps open between requests; a
// request after it opens new ones.
func (s *Store) Close() { s.transport.CloseIdleConnections() }

// Put stores size bytes from r under key. S3 makes the object visible only
// once it is complete, so a failed upload leaves nothing half-written.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	s.counts.request(OpPut)
	info, err := s.client.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{ContentType: contentType})
	s.counts.written.Add(info.Size)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Get opens an object for reading and returns its size.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	s.counts.request(OpGet)
	// One GET, whose headers give the size. (minio-go's Object asks with
	// a HEAD first, and with a second GET after a rewind.)
	body, info, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s.wrap("get", key, err)
	}
	s.counts.read.Add(info.Size)
	return body, info.Size, nil
}

// ReadAll returns a whole object.
func (s *Store) ReadAll(ctx context.Context, key string) ([]byte, error) {
	rc, _, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// Delete removes key; deleting a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	s.counts.request(OpDelete)
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key holds an object.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	s.counts.request(OpStat)
	_, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	switch {
	case err == nil:
		return true, nil
	case minio.ToErrorResponse(err).Code == "NoSuchKey":
		return false, nil
	}
	return false, fmt.Errorf("stat %s: %w", key, err)
}

// Object is a key and when its object was last written.
type Object struct {
	Key      string
	Modified time.Time
}

// Objects lists the objects under prefix with their write times.
func (s *Store) Objects(ctx context.Context, prefix string) ([]Object, error) {
	s.counts.request(OpList)
	var out []Object
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, obj.Err)
		}
		out = append(out, Object{Key: obj.Key, Modified: obj.LastModified})
	}
	return out, nil
}

// List returns the keys under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	s.counts.request(OpList)
	var keys []string
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys, nil
}

// Ping checks that the bucket is reachable.
func (s *Store) Ping(ctx context.Context) error {
	s.counts.request(OpPing)
	if _, err := s.client.BucketExists(ctx, s.bucket); err != nil {
		return fmt.Errorf("s3 ping: %w", err)
	}
	return nil
}

func (s *Store) wrap(op, key string, err error) error {
	// A HEAD's 404 has no body to name its cause; a GET's names it.
	if r := minio.ToErrorResponse(err); r.Code == "NoSuchKey" || (r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket") {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// OpenRetrying is Open, tried again every half second for up to wait:
// the object store may start after the process that needs it.
func OpenRetrying(ctx context.Context, cfg Config, wait time.Duration) (*Store, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		s, err := Open(ctx, cfg)
		if err == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
