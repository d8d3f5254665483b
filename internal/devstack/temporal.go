package devstack

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/primitives/timestamp"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
)

const (
	clusterName = "octflow-dev"
	// clusterID must be a UUID and the same on every start, or the
	// server regenerates it and no longer matches its stored metadata.
	clusterID = "6f2d7c0e-0c1a-4d5e-9b8f-0c7f1e2d3a4b"
)

// temporalOptions is what the embedded Temporal server needs to know.
type temporalOptions struct {
	frontendAddr     string // host:port of the gRPC frontend
	databaseFile     string
	postgres         *Postgres // when set, instead of databaseFile
	namespace        string
	retention        time.Duration
	searchAttributes map[string]enumspb.IndexedValueType
	dynamicConfig    map[string]any
	logger           *zap.Logger
}

// newTemporalServer assembles a single-process Temporal server (all four
// services) on SQLite file persistence, or on PostgreSQL when
// opts.postgres is set. The schema is created only where it does not
// exist yet, so a restart keeps every workflow.
func newTemporalServer(opts temporalOptions) (temporal.Server, error) {
	host, portText, err := net.SplitHostPort(opts.frontendAddr)
	if err != nil {
		return nil, fmt.Errorf("temporal address %q: %w", opts.frontendAddr, err)
	}
	frontendPort, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("temporal port %q: %w", portText, err)
	}
	var conf config.Config
	if opts.postgres != nil {
		if err := SetupPostgres(*opts.postgres, opts.logger); err != nil {
			return nil, err
		}
		conf.Persistence.DefaultStore = "default"
		conf.Persistence.VisibilityStore = "visibility"
		conf.Persistence.NumHistoryShards = postgresShards
		conf.Persistence.DataStores = map[string]config.DataStore{
			"default":    {SQL: opts.postgres.sqlConfig(opts.postgres.Database)},
			"visibility": {SQL: opts.postgres.sqlConfig(opts.postgres.VisibilityDatabase)},
		}
	} else {
		sqlConf, visConf, err := prepareSQLite(opts)
		if err != nil {
			return nil, err
		}
		conf.Persistence.DefaultStore = "sqlite"
		conf.Persistence.VisibilityStore = "sqlite-visibility"
		conf.Persistence.NumHistoryShards = 1
		conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}, "sqlite-visibility": {SQL: visConf}}
	}

	ports, err := freePorts(host, 4, internalPortsFrom, internalPortsTo)
	if err != nil {
		return nil, err
	}
	servicePorts := map[primitives.ServiceName]int{
		primitives.FrontendService: frontendPort,
		primitives.HistoryService:  ports[0],
		primitives.MatchingService: ports[1],
		primitives.WorkerService:   ports[2],
	}
	httpPort := ports[3]

	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = host
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             opts.frontendAddr,
				HTTPAddress:            net.JoinHostPort(host, strconv.Itoa(httpPort)),
				ClusterID:              clusterID,
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for svc, port := range servicePorts {
		sc := config.Service{}
		sc.RPC.GRPCPort = port
		sc.RPC.BindOnIP = host
		if svc == primitives.FrontendService {
			sc.RPC.HTTPPort = httpPort
		}
		conf.Services[string(svc)] = sc
		hosts[svc] = static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(port)))
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = opts.frontendAddr

	logger := log.NewZapLogger(opts.logger)
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("temporal authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("temporal claim mapper: %w", err)
	}

	dc := dynamicconfig.StaticClient{}
	for k, v := range opts.dynamicConfig {
		dc[dynamicconfig.MakeKey(k)] = v
	}

	srv, err := temporal.NewServer(
		temporal.WithConfig(&conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		return nil, fmt.Errorf("new temporal server: %w", err)
	}
	return srv, nil
}

// visibilitySuffix names the visibility store's own SQLite file beside
// the main one. Its own file has its own write lock: the visibility
// records (one or more per workflow task that changes an exam's state)
// no longer wait for, or hold up, the history writes that move exams on.
const visibilitySuffix = "-visibility"

// prepareSQLite creates the schemas on first start and registers the
// namespace with octflow's search attributes (a no-op when it exists). It
// returns the main store and the visibility store: a file of its own on
// a data dir made since visibility moved out, else the main file (a data
// dir from before keeps its visibility records where they are).
func prepareSQLite(opts temporalOptions) (store, visibility *config.SQL, err error) {
	visFile := strings.TrimSuffix(opts.databaseFile, ".db") + visibilitySuffix + ".db"
	store, visibility = sqliteConfig(opts.databaseFile), sqliteConfig(visFile)
	fresh, err := missing(opts.databaseFile)
	if err != nil {
		return nil, nil, err
	}
	if fresh {
		if err := os.MkdirAll(filepath.Dir(opts.databaseFile), 0o755); err != nil {
			return nil, nil, fmt.Errorf("create database dir: %w", err)
		}
		for _, c := range []*config.SQL{store, visibility} {
			if err := sqliteschema.SetupSchema(c); err != nil {
				return nil, nil, fmt.Errorf("set up temporal schema in %s: %w", c.DatabaseName, err)
			}
		}
	} else if noVis, err := missing(visFile); err != nil {
		return nil, nil, err
	} else if noVis {
		visibility = store
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.namespace, false, opts.searchAttributes)
	if err != nil {
		return nil, nil, fmt.Errorf("namespace config: %w", err)
	}
	ns.Detail.Config.Retention = timestamp.DurationPtr(opts.retention)
	if err := sqliteschema.CreateNamespaces(store, ns); err != nil {
		return nil, nil, fmt.Errorf("register namespace %q: %w", opts.namespace, err)
	}
	if fresh {
		// Only on a new data dir: the columns of the search attributes
		// are those this namespace config just registered.
		var columns []string
		for column := range ns.Detail.Config.CustomSearchAttributeAliases {
			columns = append(columns, column)
		}
		if err := trimVisibilityIndexes(context.Background(), visFile, columns); err != nil {
			return nil, nil, err
		}
	}
	return store, visibility, nil
}

// sqliteConfig is the server's connection to one SQLite file.
func sqliteConfig(file string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: file,
		ConnectAttributes: map[string]string{
			"mode": "rwc",
			// WAL with synchronous=normal measured 3x faster than the
			// default rollback journal on these machines, and still
			// survives a process crash (only an OS crash can lose the tail).
			"journal_mode": "wal",
			"synchronous":  "normal",
			"busy_timeout": "10000",
		},
	}
}

// missing reports whether no file is at path.
func missing(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return false, nil
	case os.IsNotExist(err):
		return true, nil
	}
	return false, fmt.Errorf("stat %s: %w", path, err)
}
