package audit

import (
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LogSink writes events as JSON lines, one per event, never sampled: the
// trail of a dev run, where no collector is configured.
type LogSink struct {
	core zapcore.Core
	ws   zapcore.WriteSyncer
	src  Source

	mu      sync.Mutex
	written time.Time // the last event written
	refused uint64    // events it could not write
}

// NewLogSink writes to ws through a zap core of its own (the process
// logger's sampling would drop lines). Each Record syncs ws; a file
// therefore holds the event when Record returns.
func NewLogSink(ws zapcore.WriteSyncer, src Source) *LogSink {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	return &LogSink{core: zapcore.NewCore(zapcore.NewJSONEncoder(enc), ws, zapcore.InfoLevel), ws: ws, src: src}
}

// Record writes ev.
func (l *LogSink) Record(ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev, _ = bounded(ev)
	fields := []zapcore.Field{
		zap.String("eventId", ev.ID.Meaning), zap.String("action", string(ev.Action)),
		zap.Int("outcome", int(ev.Outcome)), zap.String("user", ev.User.ID), zap.String("role", ev.User.Role),
		zap.String("address", ev.User.Address), zap.String("source", l.src.ID),
	}
	if ev.Description != "" {
		fields = append(fields, zap.String("description", ev.Description))
	}
	for _, t := range ev.Types {
		fields = append(fields, zap.String("eventType", t.Meaning))
	}
	var objects []map[string]string
	for _, o := range ev.Objects {
		f := map[string]string{"id": o.ID, "type": o.IDType.Code}
		for _, d := range o.Details {
			f[d.Type] = d.Value
		}
		objects = append(objects, f)
	}
	fields = append(fields, zap.Any("objects", objects))
	err := l.core.Write(zapcore.Entry{Level: zapcore.InfoLevel, Time: ev.Time, LoggerName: "audit", Message: ev.ID.Meaning}, fields)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.refused++
		return err
	}
	_ = l.ws.Sync() // stderr and pipes cannot sync; a file can
	l.written = time.Now()
	return nil
}

// Stats are the sink's figures, as a Trail's: nothing ever waits (each
// event is written before Record returns), so nothing is pending and
// there is no spool; LastTaken is the last event written, Refused the
// events it could not write.
func (l *LogSink) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{LastTaken: l.written, Refused: l.refused}
}
