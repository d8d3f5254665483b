package config

import "strconv"

// Join is what a process of any role (octflow api, worker, gpuworker) is
// told to join a running stack: the stack, the files of the credentials
// it reads and the callbacks' settings. The dev system hands it to the
// processes it does not run itself (internal/devsystem).
type Join struct {
	Stack Stack
	// TokensFile, PseudonymKeyFile, CodecKeysFile and IdentityKeysFile
	// name the files of the gateway's tokens, the pseudonym key, the
	// payload keys and the identity keys.
	TokensFile, PseudonymKeyFile, CodecKeysFile, IdentityKeysFile string
	// WebhookSecret signs every campus's report-ready events;
	// CallbackAllow and PublicURL are as in Webhooks.
	WebhookSecret, CallbackAllow, PublicURL string
}

// Env is j as the OCTFLOW_* variables that set it (NAME=value), each
// named as its binder reads it; an empty field sets none, and its
// default holds.
func (j Join) Env() []string {
	s := j.Stack
	tls := ""
	if s.S3.UseTLS {
		tls = strconv.FormatBool(true)
	}
	vars := []struct{ name, value string }{
		{"OCTFLOW_TEMPORAL_ADDR", s.TemporalAddr},
		{"OCTFLOW_NAMESPACE", s.Namespace},
		{"OCTFLOW_TEMPORAL_COMPRESSION", s.TemporalCompression},
		{"OCTFLOW_S3_ENDPOINT", s.S3.Endpoint},
		{"OCTFLOW_S3_BUCKET", s.S3.Bucket},
		{"OCTFLOW_S3_ACCESS_KEY", s.S3.AccessKey},
		{"OCTFLOW_S3_SECRET_KEY", s.S3.SecretKey},
		{"OCTFLOW_S3_TLS", tls},
		{"OCTFLOW_S3_REGION", s.S3.Region},
		{"OCTFLOW_S3_CA_FILE", s.S3.CAFile},
		{"OCTFLOW_TOKENS_FILE", j.TokensFile},
		{"OCTFLOW_PSEUDONYM_KEY_FILE", j.PseudonymKeyFile},
		{"OCTFLOW_CODEC_KEYS_FILE", j.CodecKeysFile},
		{"OCTFLOW_IDENTITY_KEYS_FILE", j.IdentityKeysFile},
		{"OCTFLOW_WEBHOOK_SECRET", j.WebhookSecret},
		{"OCTFLOW_CALLBACK_ALLOW", j.CallbackAllow},
		{"OCTFLOW_PUBLIC_URL", j.PublicURL},
	}
	var env []string
	for _, v := range vars {
		if v.value != "" {
			env = append(env, v.name+"="+v.value)
		}
	}
	return env
}
