package devstack

import "testing"

func TestParsePostgresURL(t *testing.T) {
	tests := []struct {
		url     string
		want    Postgres
		wantErr bool
	}{
		{url: "postgres://temporal:s3cret@db.example:6432/octflow_temporal",
			want: Postgres{Addr: "db.example:6432", User: "temporal", Password: "s3cret", Database: "octflow_temporal", VisibilityDatabase: "octflow_temporal_visibility"}},
		{url: "postgresql://temporal@127.0.0.1",
			want: Postgres{Addr: "127.0.0.1:5432", User: "temporal", Database: "temporal", VisibilityDatabase: "temporal_visibility"}},
		{url: "postgres://u:p%40ss@[::1]:5433/t",
			want: Postgres{Addr: "[::1]:5433", User: "u", Password: "p@ss", Database: "t", VisibilityDatabase: "t_visibility"}},
		{url: "mysql://temporal@db:3306/temporal", wantErr: true},
		{url: "postgres:///temporal", wantErr: true},
		{url: "://", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := ParsePostgresURL(tt.url)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
