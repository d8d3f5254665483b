package config

import (
	"errors"
	"maps"
	"reflect"
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
