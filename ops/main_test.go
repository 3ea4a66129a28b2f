package ops_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// outboxWithBroker is a migrated database of the test's own, a broker and a
// connection to the database.
func outboxWithBroker(t *testing.T) (dbURL string, broker *kfake.Cluster, conn *pgx.Conn) {
	t.Helper()
	dbURL = testenv.MigratedDatabase(t)
	return dbURL, testenv.Kafka(t), testenv.Connect(t, dbURL)
}
