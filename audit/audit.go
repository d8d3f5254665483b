// Package audit writes octflow's audit trail: one DICOM PS3.15 A.5 audit
// message (the IHE ATNA schema) per access decision, allowed or refused,
// never sampled.
//
// A message is made durable before the decision's answer leaves: Record
// appends it, framed as an RFC 5424 syslog message, to a local journal
// and fsyncs it. A shipper then copies the journal, in order, to a
// syslog collector over TLS (RFC 5425), reconnecting with backoff while
// the collector is away; what the collector has not been shown to hold
// is sent again, so delivery is at least once and a message keeps its
// sequence number ([meta sequenceId]) when it is resent.
//
// No message names a patient: exams are named by campus and exam ID.
package audit

import (
	"errors"
	"time"
)

// Sink takes audit events. Record returns once the event is durable (or
// has failed to become so); a caller that is about to disclose data must
// not do so when Record returns an error.
type Sink interface {
	Record(Event) error
}

// Admitter is a Sink that can say before an action whether it could
// record it now: a caller asks before it acts (starts an exam, records a
// review), so that an action is not taken whose entry the trail would
// then refuse.
type Admitter interface {
	// Admit returns ErrSpoolFull (or the journal's failure) unless
	// entries of need bytes would be taken now, for who (the caller, as
	// Event.User names it; the zero User: none), whose own entries may
	// hold at most their share of the spool (ErrPrincipalShare).
	Admit(who User, need int64) error
}

// ErrSpoolFull is returned by Record when the local journal holds its
// cap of messages the collector has not taken yet.
var ErrSpoolFull = errors.New("audit: spool full")

// Event is one audited decision.
type Event struct {
	// Time is when the decision was made (default: now).
	Time time.Time
	// ID is the event's DICOM Event ID, e.g. PatientRecord.
	ID Code
	// Types are its Event Type Codes, if any.
	Types []Code
	// Action is what was done or attempted.
	Action Action
	// Outcome says whether it was allowed and done.
	Outcome Outcome
	// Description says more about the outcome (no patient data).
	Description string
	// User is who asked.
	User User
	// Objects are what the decision was about.
	Objects []Object
	// Unauthenticated marks a decision made for a caller no credential
	// identified: a missing or unknown token, a failed sign-in, a route
	// or method refused before authentication (404, 405). Anyone can make
	// these at will, so they share a bounded part of the spool (see
	// Trail.Record). A failed User Authentication event is one too.
	Unauthenticated bool
}

// anonymous says whether ev was made for a caller no credential
// identified.
func (ev Event) anonymous() bool {
	return ev.Unauthenticated || ev.ID == UserAuthenticated && ev.Outcome != Success
}

// User is the person or device that asked.
type User struct {
	// ID names them (a token's principal name; "unauthenticated" if none).
	ID string
	// Role is their octflow role (device, clinician, admin), if known.
	Role string
	// Address is the network address the request came from.
	Address string
}

// Object is something a decision was about: an exam, a route, a query.
type Object struct {
	// ID identifies it: never a patient identifier.
	ID string
	// IDType says what kind of ID it is.
	IDType Code
	// Type and Role are ParticipantObjectTypeCode and
	// ParticipantObjectTypeCodeRole (PS3.15 A.5.1.2).
	Type, Role int
	// Name is a human label (optional, no patient data).
	Name string
	// Details are name/value pairs (values are base64 in the message).
	Details []Detail
}

// Detail is one ParticipantObjectDetail.
type Detail struct {
	Type  string
	Value string
}

// Action is an EventActionCode.
type Action string

// The event action codes.
const (
	Create  Action = "C"
	Read    Action = "R"
	Update  Action = "U"
	Delete  Action = "D"
	Execute Action = "E"
)

// Outcome is an EventOutcomeIndicator.
type Outcome int

// The event outcomes.
const (
	Success        Outcome = 0
	MinorFailure   Outcome = 4
	SeriousFailure Outcome = 8
	MajorFailure   Outcome = 12
)

// Code is a coded value: csd-code, codeSystemName, originalText.
type Code struct {
	Code, System, Meaning string
}

// dcm is a code of DICOM's own coding scheme (DCM).
func dcm(code, meaning string) Code { return Code{Code: code, System: "DCM", Meaning: meaning} }

// Event IDs (DICOM CID 400) and type codes this package's users need.
var (
	InstancesAccessed       = dcm("110103", "DICOM Instances Accessed")
	InstancesTransferred    = dcm("110104", "DICOM Instances Transferred")
	Export                  = dcm("110106", "Export")
	Import                  = dcm("110107", "Import")
	PatientRecord           = dcm("110110", "Patient Record")
	Query                   = dcm("110112", "Query")
	SecurityAlert           = dcm("110113", "Security Alert")
	UserAuthenticated       = dcm("110114", "User Authentication")
	Login                   = dcm("110122", "Login")
	UseOfRestrictedFunction = dcm("110132", "Use of Restricted Function")
	AuditRecordingStopped   = dcm("110133", "Audit Recording Stopped")
	AuditRecordingStarted   = dcm("110134", "Audit Recording Started")
	DestinationRoleID       = dcm("110152", "Destination Role ID")
)

// Source is who reports: the process writing the trail.
type Source struct {
	// ID is the AuditSourceID and the process participant's UserID, e.g.
	// "api@host".
	ID string
	// Site is the AuditEnterpriseSiteID (optional), e.g. the hospital.
	Site string
	// Host is the machine's name, the process's network access point
	// and the syslog HOSTNAME.
	Host string
	// PID is the process ID (the syslog PROCID).
	PID int
}
