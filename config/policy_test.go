package config

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"octflow/exam"
)

func TestThePolicyThroughItsSettingsIsThePolicy(t *testing.T) {
	for _, def := range []exam.Policy{exam.DefaultPolicy(), {MaxAttempts: 1, RetryBase: 1, RetryCap: 1, StageTimeout: 2, HeartbeatTimeout: 1,
		Weights: map[exam.Priority]float32{exam.Urgent: 1, exam.Normal: 1, exam.Low: 1}, ReviewWindow: 1, ExportRetryFor: 7, CampusShare: 1,
		CampusWeights: map[string]float32{"north": 2, "south": 0.5}}} {
		s := New("test", env(nil))
		p := BindPolicy(s, def)
		if err := s.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if def.Aging == nil {
			def.Aging = map[exam.Priority]time.Duration{exam.Normal: 0, exam.Low: 0}
		}
		if !reflect.DeepEqual(*p, def) {
			t.Errorf("policy through its settings %+v, want %+v", *p, def)
		}
	}
}

func TestSettingThePolicyLeavesItsDefaultAlone(t *testing.T) {
	def := exam.DefaultPolicy()
	def.CampusWeights = map[string]float32{"north": 2}
	s := New("test", env(map[string]string{"OCTFLOW_BUCKET_WEIGHTS": "1/1/1", "OCTFLOW_AGING_LOW": "1m",
		"OCTFLOW_CAMPUS_WEIGHTS": "north=3"}))
	BindPolicy(s, def)
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if fresh := exam.DefaultPolicy(); !maps.Equal(def.Weights, fresh.Weights) || !maps.Equal(def.Aging, fresh.Aging) ||
		def.CampusWeights["north"] != 2 {
		t.Errorf("the default changed under its settings: %v, %v, %v", def.Weights, def.Aging, def.CampusWeights)
	}
}

func TestAPolicyThatCannotWorkIsRefusedNamingItsVariable(t *testing.T) {
	cases := []struct {
		vars map[string]string
		want []string // what the error must name
	}{
		{map[string]string{"OCTFLOW_MAX_ATTEMPTS": "0"}, []string{"OCTFLOW_MAX_ATTEMPTS", "at least 1"}},
		{map[string]string{"OCTFLOW_MAX_ATTEMPTS": "4294967297"}, []string{"OCTFLOW_MAX_ATTEMPTS", "not a whole number"}},
		{map[string]string{"OCTFLOW_RETRY_BASE": "10m", "OCTFLOW_RETRY_CAP": "1m"}, []string{"OCTFLOW_RETRY_CAP", "at least the retry base"}},
		{map[string]string{"OCTFLOW_HEARTBEAT_TIMEOUT": "20m"}, []string{"OCTFLOW_HEARTBEAT_TIMEOUT", "below the stage timeout"}},
		{map[string]string{"OCTFLOW_MAX_LOST_ATTEMPTS": "-1", "OCTFLOW_REVIEW_WINDOW": "0s"},
			[]string{"OCTFLOW_MAX_LOST_ATTEMPTS", "OCTFLOW_REVIEW_WINDOW"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(slices.Sorted(maps.Keys(c.vars)), ","), func(t *testing.T) {
			s := New("test", env(c.vars))
			BindPolicy(s, exam.DefaultPolicy())
			err := s.Parse(nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Every setting the policy's check can refuse has a variable to name,
// but the export's retry time and the campus's share, which are no
// settings (the gateway resolves the share for each exam).
func TestEveryPolicyCheckNamesAVariable(t *testing.T) {
	bad := exam.Policy{LostAttempts: -1, RetryCap: -1, Aging: map[exam.Priority]time.Duration{exam.Low: -1},
		UrgentSLA: -1, ReviewReminder: -1, InfraRetryFor: -1, ExportRetryFor: -1, NodeAffinityWait: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *exam.PolicyError
		if !errors.As(e, &pe) {
			t.Fatalf("%v is no PolicyError", e)
		}
		if v := policyVar(pe.Field); (v == "") != (pe.Field == "exportRetryFor" || pe.Field == "campusShare") {
			t.Errorf("policy field %s: variable %q", pe.Field, v)
		}
	}
}
