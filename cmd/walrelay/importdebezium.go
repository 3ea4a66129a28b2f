package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/debezium"
)

func importDebeziumCommand() *cobra.Command {
	var workerFile string
	var allowDifferences bool
	var databaseURL string
	cmd := &cobra.Command{
		Use:   "import-debezium FILE",
		Short: "Print the walrelay YAML equivalent of a Debezium PostgreSQL outbox connector configuration",
		Long: "import-debezium reads a Debezium PostgreSQL connector configuration, as JSON for Kafka Connect's\n" +
			"REST API, as a Debezium Server .properties file or as a Strimzi KafkaConnector resource (YAML), and\n" +
			"prints the walrelay configuration file that does the same on stdout. Converters are read from the\n" +
			"connector, else from the Kafka Connect worker's properties (--worker) or a Strimzi KafkaConnect in\n" +
			"the same YAML. Regular expressions in table.include.list are resolved against the tables of\n" +
			"--database-url. An option that changes the records and that walrelay cannot\n" +
			"reproduce makes it exit 2 naming the option, unless --allow-differences; options that change no\n" +
			"record and have no equivalent are printed as comments. Passwords are not copied.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read the Debezium configuration: %w", err)
			}
			var worker map[string]string
			if workerFile != "" {
				w, err := os.ReadFile(workerFile)
				if err != nil {
					return fmt.Errorf("read the Kafka Connect worker properties (--worker): %w", err)
				}
				worker = debezium.ParseProperties(string(w))
			}
			var catalog []string
			if databaseURL != "" {
				if catalog, err = debezium.CatalogTables(cmd.Context(), databaseURL); err != nil {
					return err
				}
			}
			out, diffs, err := debezium.Import(filepath.Base(args[0]), data, worker, catalog)
			if err != nil {
				return err
			}
			if len(diffs) > 0 && !allowDifferences {
				return fmt.Errorf("%s: walrelay's records would differ from Debezium's:\n  %s\n"+
					"change or remove these options in the connector, or run with --allow-differences to write the YAML "+
					"anyway, each difference as a comment", filepath.Base(args[0]), strings.Join(diffs, "\n  "))
			}
			_, err = io.WriteString(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&workerFile, "worker", "", "the Kafka Connect worker's properties file (connect-distributed.properties), "+
		"where key.converter and value.converter are usually set")
	cmd.Flags().StringVar(&databaseURL, "database-url", "", "the outbox database, whose tables resolve the regular expressions "+
		"of table.include.list (without it such an entry is a difference)")
	cmd.Flags().BoolVar(&allowDifferences, "allow-differences", false, "write the YAML even where walrelay's records would differ "+
		"from Debezium's (each difference is a comment)")
	return cmd
}
