package catalog_test

import (
	"os"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
