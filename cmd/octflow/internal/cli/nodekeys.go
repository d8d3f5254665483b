package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"octflow/codec"
	"octflow/exam"
)

// runNodeKeys writes the payload keys of a GPU node bound to some
// campuses: each campus's keys and the system's, derived from the
// stack's payload keys (codec.ScopeKeys). deploy/make-node.sh runs it.
func runNodeKeys(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("node-keys", flag.ContinueOnError)
	in := fs.String("keys", "", "the stack's payload keys (codec-keys.json); - or empty: standard input")
	campuses := fs.String("campus", "", "the campuses the node serves, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out, err := NodeKeys(*in, *campuses, os.Stdin)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

// NodeKeys derives the key file of a node serving campuses (a comma
// list) from the payload keys at path (or r).
func NodeKeys(path, campuses string, r io.Reader) ([]byte, error) {
	var scopes []codec.Scope
	for c := range strings.SplitSeq(campuses, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if err := exam.ValidateCampus(c); err != nil {
			return nil, fmt.Errorf("--campus: %w", err)
		}
		scopes = append(scopes, codec.CampusScope(c))
	}
	if len(scopes) == 0 {
		return nil, errors.New("--campus: name the campuses the node serves (a node serving every campus takes codec-keys.json itself)")
	}
	var raw []byte
	var err error
	if path == "" || path == "-" {
		raw, err = io.ReadAll(io.LimitReader(r, 1<<20))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("payload keys: %w", err)
	}
	keys, err := codec.ParseKeys(raw)
	if err != nil {
		return nil, err
	}
	scoped, err := codec.ScopeKeys(keys, scopes...)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(scoped, "", "  ")
	return append(b, '\n'), err
}
