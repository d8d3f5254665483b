// Package config reads an octflow process's configuration once, at
// start. Every setting is a command-line flag with an OCTFLOW_*
// environment variable (secrets: the environment only, so they never
// show in ps); the flag wins over the variable, the variable over the
// default. A value that does not parse or cannot work stops the process
// with the variable's name and the reason: nothing falls back to a
// default silently.
//
// Every OCTFLOW_* setting of every command is declared here, once: the
// groups of settings (Stack, the policy, Webhooks, GPUNode, …) bind
// themselves to a Set and are ready to use once Set.Parse returned
// without error. Where octflow has a type for what is set, config binds
// into it (exam.Policy, checked by its own Validate; audit.Config): config
// imports those vocabulary packages and no part that runs. Package app
// turns the settings into the parts they configure (a codec, the
// callback guard, model backends, the audit trail, …); where a value's
// check is that part's own rule (the codec's keys, the allow-list's
// syntax), app runs it at start, naming the variable.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Set is one command's settings.
type Set struct {
	fs      *flag.FlagSet
	lookup  func(string) (string, bool)
	errs    []error
	vars    []string
	envOnly []string // secrets: read from the environment, never a flag
	checks  []func() error
}

// New starts the settings of command name. lookup reads the environment
// (nil: os.LookupEnv).
func New(name string, lookup func(string) (string, bool)) *Set {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	s := &Set{fs: fs, lookup: lookup}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of %s:\n", name)
		fs.PrintDefaults()
		if len(s.envOnly) > 0 {
			fmt.Fprintf(fs.Output(), "\nRead from the environment only (secrets):\n  %s\n",
				strings.Join(slices.Sorted(slices.Values(s.envOnly)), "\n  "))
		}
	}
	return s
}

// FlagSet is the underlying flag set, for usage output.
func (s *Set) FlagSet() *flag.FlagSet { return s.fs }

// Vars lists every environment variable the command reads, sorted.
func (s *Set) Vars() []string { return slices.Sorted(slices.Values(s.vars)) }

// Parse parses args, then reports every setting that did not parse or
// failed its check, each naming its variable.
func (s *Set) Parse(args []string) error {
	if err := s.fs.Parse(args); err != nil {
		return err
	}
	if s.fs.NArg() > 0 {
		s.errs = append(s.errs, fmt.Errorf("unexpected arguments: %s", strings.Join(s.fs.Args(), " ")))
	}
	for _, check := range s.checks {
		if err := check(); err != nil {
			s.errs = append(s.errs, err)
		}
	}
	return errors.Join(s.errs...)
}

// Check adds a check that runs once everything is parsed.
func (s *Set) Check(check func() error) { s.checks = append(s.checks, check) }

// env returns the variable's value, if set and not empty.
func (s *Set) env(name string) (string, bool) {
	s.vars = append(s.vars, name)
	v, ok := s.lookup(name)
	return v, ok && v != ""
}

// bind registers a flag whose default comes from env: parse reads both.
func bind[T any](s *Set, p *T, name, env string, def T, usage string, parse func(string) (T, error)) {
	*p = def
	if raw, ok := s.env(env); ok {
		v, err := parse(raw)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: %w", env, raw, err))
		} else {
			*p = v
		}
	}
	_, isBool := any(def).(bool)
	s.fs.Var(&value[T]{p: p, parse: parse, isBool: isBool}, name, fmt.Sprintf("%s (%s)", usage, env))
}

// value is a flag bound to a setting.
type value[T any] struct {
	p      *T
	parse  func(string) (T, error)
	isBool bool
}

func (v *value[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return fmt.Sprint(*v.p)
}

func (v *value[T]) Set(raw string) error {
	x, err := v.parse(raw)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

// IsBoolFlag lets -name alone mean true, as with flag.Bool.
func (v *value[T]) IsBoolFlag() bool { return v.isBool }

// String binds a string setting.
func (s *Set) String(p *string, name, env, def, usage string) {
	bind(s, p, name, env, def, usage, func(v string) (string, error) { return v, nil })
}

// Duration binds a duration setting (Go syntax: 90s, 5m, 1h30m).
func (s *Set) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	bind(s, p, name, env, def, usage, func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, errors.New("not a duration (write it like 90s, 5m or 1h30m)")
		}
		if d < 0 {
			return 0, errors.New("a duration cannot be negative")
		}
		return d, nil
	})
}

// Int binds a whole-number setting.
func (s *Set) Int(p *int, name, env string, def int, usage string) {
	bind(s, p, name, env, def, usage, func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, errors.New("not a whole number")
		}
		return n, nil
	})
}

// Float binds a number setting.
func (s *Set) Float(p *float64, name, env string, def float64, usage string) {
	bind(s, p, name, env, def, usage, func(v string) (float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, errors.New("not a number")
		}
		return f, nil
	})
}

// Bool binds a true/false setting.
func (s *Set) Bool(p *bool, name, env string, def bool, usage string) {
	bind(s, p, name, env, def, usage, func(v string) (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, errors.New("want true or false")
		}
		return b, nil
	})
}

// Secret reads a setting from the environment only.
func (s *Set) Secret(p *string, env string) {
	if !slices.Contains(s.envOnly, env) {
		s.envOnly = append(s.envOnly, env)
	}
	if v, ok := s.env(env); ok {
		*p = v
	}
}

// SecretFile reads a secret from the file named by fileEnv, or else from
// env itself; the file wins.
func (s *Set) SecretFile(p *string, fileEnv, env string) {
	s.Secret(p, env)
	s.envOnly = append(s.envOnly, fileEnv)
	if path, ok := s.env(fileEnv); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: %w", fileEnv, path, err))
			return
		}
		*p = strings.TrimSpace(string(b))
	}
}
