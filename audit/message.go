package audit

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"strconv"
	"time"
)

// The XML of PS3.15 A.5.1's audit message schema. Elements are written in
// the schema's order.
type (
	auditMessage struct {
		XMLName      xml.Name            `xml:"AuditMessage"`
		Event        eventIdentification `xml:"EventIdentification"`
		Participants []activeParticipant `xml:"ActiveParticipant"`
		Source       auditSource         `xml:"AuditSourceIdentification"`
		Objects      []participantObject `xml:"ParticipantObjectIdentification"`
	}
	codedValue struct {
		Code    string `xml:"csd-code,attr"`
		System  string `xml:"codeSystemName,attr"`
		Meaning string `xml:"originalText,attr"`
	}
	eventIdentification struct {
		Action      string       `xml:"EventActionCode,attr,omitempty"`
		DateTime    string       `xml:"EventDateTime,attr"`
		Outcome     string       `xml:"EventOutcomeIndicator,attr"`
		ID          codedValue   `xml:"EventID"`
		Types       []codedValue `xml:"EventTypeCode"`
		Description string       `xml:"EventOutcomeDescription,omitempty"`
	}
	activeParticipant struct {
		UserID      string       `xml:"UserID,attr"`
		AltUserID   string       `xml:"AlternativeUserID,attr,omitempty"`
		Requestor   bool         `xml:"UserIsRequestor,attr"`
		AccessPoint string       `xml:"NetworkAccessPointID,attr,omitempty"`
		AccessType  string       `xml:"NetworkAccessPointTypeCode,attr,omitempty"`
		Roles       []codedValue `xml:"RoleIDCode"`
	}
	auditSource struct {
		Site string     `xml:"AuditEnterpriseSiteID,attr,omitempty"`
		ID   string     `xml:"AuditSourceID,attr"`
		Type codedValue `xml:"AuditSourceTypeCode"`
	}
	participantObject struct {
		ID      string      `xml:"ParticipantObjectID,attr"`
		Type    string      `xml:"ParticipantObjectTypeCode,attr,omitempty"`
		Role    string      `xml:"ParticipantObjectTypeCodeRole,attr,omitempty"`
		IDType  codedValue  `xml:"ParticipantObjectIDTypeCode"`
		Name    string      `xml:"ParticipantObjectName,omitempty"`
		Details []valuePair `xml:"ParticipantObjectDetail"`
	}
	valuePair struct {
		Type  string `xml:"type,attr"`
		Value string `xml:"value,attr"`
	}
)

// xmlDecl opens every message; it has no newline, so a message is one
// line in a collector's file.
const xmlDecl = `<?xml version="1.0" encoding="UTF-8"?>`

// Marshal renders an event as a PS3.15 A.5 AuditMessage reported by src:
// the user who asked is the requesting participant, src's process the
// other. Every field is cut to its bound (see MaxDescription), and when
// the message would still be longer than a collector takes, trailing
// objects are dropped and the description says how many: an entry never
// grows with what a client sent.
func Marshal(src Source, ev Event) ([]byte, error) {
	if ev.ID.Code == "" {
		return nil, fmt.Errorf("audit: event has no event ID")
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	desc := ev.Description // bounded adds its note to a bounded copy
	ev, dropped := bounded(ev)
	src = Source{ID: Bound(src.ID, maxName), Site: Bound(src.Site, maxObjectText), Host: Bound(src.Host, 255), PID: src.PID}
	b, err := marshal(src, ev)
	if err != nil || len(b) <= maxXML {
		return b, err
	}
	// Halve the objects kept until the message fits (one object and the
	// bounded fields always do).
	all := ev.Objects
	for keep := len(all); len(b) > maxXML && keep > 1; {
		keep /= 2
		ev.Objects, ev.Description = all[:keep], withOmitted(desc, dropped+len(all)-keep)
		if b, err = marshal(src, ev); err != nil {
			return nil, err
		}
	}
	if len(b) > maxXML {
		return nil, fmt.Errorf("audit: entry of %d bytes over the %d-byte bound", len(b), maxXML)
	}
	return b, nil
}

// marshal renders a bounded event.
func marshal(src Source, ev Event) ([]byte, error) {
	user := activeParticipant{UserID: nonEmpty(ev.User.ID, "unknown"), Requestor: true}
	if ev.User.Address != "" {
		user.AccessPoint, user.AccessType = ev.User.Address, "2" // IP address
	}
	if ev.User.Role != "" {
		user.Roles = []codedValue{{Code: ev.User.Role, System: "octflow-role", Meaning: ev.User.Role}}
	}
	process := activeParticipant{
		UserID: nonEmpty(src.ID, "octflow"), Requestor: false,
		Roles: []codedValue{coded(DestinationRoleID)},
	}
	if src.PID > 0 {
		process.AltUserID = strconv.Itoa(src.PID)
	}
	if src.Host != "" {
		process.AccessPoint, process.AccessType = src.Host, "1" // machine name
	}
	m := auditMessage{
		Event: eventIdentification{
			Action:      string(ev.Action),
			DateTime:    ev.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			Outcome:     strconv.Itoa(int(ev.Outcome)),
			ID:          coded(ev.ID),
			Description: ev.Description,
		},
		Participants: []activeParticipant{user, process},
		// 4: an application server process tier in a multi-tier system.
		Source: auditSource{Site: src.Site, ID: nonEmpty(src.ID, "octflow"),
			Type: codedValue{Code: "4", System: "DCM", Meaning: "Application Server"}},
	}
	for _, t := range ev.Types {
		m.Event.Types = append(m.Event.Types, coded(t))
	}
	for _, o := range ev.Objects {
		po := participantObject{ID: o.ID, IDType: coded(o.IDType), Name: o.Name}
		if o.Type > 0 {
			po.Type = strconv.Itoa(o.Type)
		}
		if o.Role > 0 {
			po.Role = strconv.Itoa(o.Role)
		}
		for _, d := range o.Details {
			po.Details = append(po.Details, valuePair{Type: d.Type, Value: base64.StdEncoding.EncodeToString([]byte(d.Value))})
		}
		m.Objects = append(m.Objects, po)
	}
	b, err := xml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("audit: marshal: %w", err)
	}
	return append([]byte(xmlDecl), b...), nil
}

func coded(c Code) codedValue { return codedValue{Code: c.Code, System: c.System, Meaning: c.Meaning} }

func nonEmpty(s, or string) string {
	if s == "" {
		return or
	}
	return s
}
