package devstack

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
	"go.uber.org/zap"
)

// postgresShards is the history shard count of a dev stack on
// PostgreSQL. Like any cluster's, it is fixed when the database is
// first set up.
const postgresShards = 4

// Postgres says where the Temporal server keeps its state when it is not
// the SQLite file: one PostgreSQL server with two databases, Temporal's
// own and its visibility store.
type Postgres struct {
	Addr               string // host:port
	User, Password     string
	Database           string // default "temporal"
	VisibilityDatabase string // default Database + "_visibility"
}

// ParsePostgresURL reads postgres://user:password@host:port/database; the
// visibility database is the database's name with "_visibility" added.
func ParsePostgresURL(raw string) (Postgres, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Postgres{}, fmt.Errorf("postgres url: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return Postgres{}, fmt.Errorf("postgres url: scheme %q, want postgres://user:password@host:port/database", u.Scheme)
	}
	host := u.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	if u.Hostname() == "" {
		return Postgres{}, errors.New("postgres url: no host")
	}
	p := Postgres{Addr: host, User: u.User.Username(), Database: strings.TrimPrefix(u.Path, "/")}
	p.Password, _ = u.User.Password()
	return p.withDefaults(), nil
}

func (p Postgres) withDefaults() Postgres {
	if p.Database == "" {
		p.Database = "temporal"
	}
	if p.VisibilityDatabase == "" {
		p.VisibilityDatabase = p.Database + "_visibility"
	}
	return p
}

// sqlConfig is the server's connection to one of the two databases.
func (p Postgres) sqlConfig(database string) *config.SQL {
	return &config.SQL{
		PluginName:      postgresql.PluginName,
		DatabaseName:    database,
		ConnectAddr:     p.Addr,
		ConnectProtocol: "tcp",
		User:            p.User,
		Password:        p.Password,
		MaxConns:        20,
		MaxIdleConns:    20,
		MaxConnLifetime: time.Hour,
	}
}

// SetupPostgres creates Temporal's two databases where they are missing
// and brings both schemas to this server's version, with Temporal's own
// SQL tool (the code of temporal-sql-tool's create-database,
// setup-schema -v 0.0 and update-schema). Each step is idempotent, so it
// runs on every start; a database that is ahead of this server is left
// alone.
func SetupPostgres(p Postgres, logger *zap.Logger) error {
	p = p.withDefaults()
	l := log.NewZapLogger(logger)
	for _, db := range []struct{ name, schema string }{
		{p.Database, "postgresql/v12/temporal"},
		{p.VisibilityDatabase, "postgresql/v12/visibility"},
	} {
		if err := sqltool.DoCreateDatabase(p.sqlConfig(db.name), "postgres", l); err != nil {
			return fmt.Errorf("create database %s: %w", db.name, err)
		}
		conn, err := sqltool.NewConnection(p.sqlConfig(db.name), l)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", db.name, err)
		}
		err = schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, l).Run()
		if err == nil {
			err = schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: db.name, SchemaName: db.schema}, l).Run()
		}
		conn.Close()
		if err != nil {
			return fmt.Errorf("schema of %s: %w", db.name, err)
		}
	}
	return nil
}
