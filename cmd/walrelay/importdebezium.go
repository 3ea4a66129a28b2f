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
	var workerFile, keyConverter, valueConverter string
	var keySchemas, valueSchemas bool
	var allowDifferences bool
	var databaseURL string
	cmd := &cobra.Command{
		Use:   "import-debezium FILE",
		Short: "Print the walrelay YAML equivalent of a Debezium PostgreSQL outbox connector configuration",
		Long: "import-debezium reads a Debezium PostgreSQL connector configuration, as JSON for Kafka Connect's\n" +
			"REST API, as a Debezium Server .properties file or as a Strimzi KafkaConnector resource (YAML), and\n" +
			"prints the walrelay configuration file that does the same on stdout. Converters are read from the\n" +
			"connector, else from --key-converter/--value-converter, else from the worker (--worker: its properties,\n" +
			"a Strimzi KafkaConnect, or the environment of Debezium's connect image) or the platform the file is\n" +
			"for (Debezium Server's formats, a Strimzi KafkaConnect in the same YAML), with the platform's defaults;\n" +
			"a connector that names no converter with nothing saying which worker runs it is refused. The tables\n" +
			"of --database-url resolve the regular expressions in table.include.list, and their column types say\n" +
			"what ByteBufferConverter writes. Confluent's Avro, Protobuf and JSON Schema converters (and Apicurio's in\n" +
			"the Confluent format) become the schema-registry-* settings; the registry's password and token are\n" +
			"not copied but named as WALRELAY_* variables. An option that changes the records and that walrelay cannot\n" +
			"reproduce makes it exit 2 naming the option, unless --allow-differences; options that change no\n" +
			"record and have no equivalent are printed as comments. Passwords are not copied.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read the Debezium configuration: %w", err)
			}
			var opts debezium.Options
			if workerFile != "" {
				w, err := os.ReadFile(workerFile)
				if err != nil {
					return fmt.Errorf("read the Kafka Connect worker (--worker): %w", err)
				}
				if opts.Worker, err = debezium.ReadWorker(filepath.Base(workerFile), w); err != nil {
					return err
				}
			}
			flag := func(name string, v *bool) *bool {
				if cmd.Flags().Changed(name) {
					return v
				}
				return nil
			}
			if opts.Converters, err = debezium.ConverterFlags(keyConverter, valueConverter,
				flag("key-converter-schemas-enable", &keySchemas), flag("value-converter-schemas-enable", &valueSchemas)); err != nil {
				return err
			}
			if databaseURL != "" {
				if opts.Catalog, err = debezium.ReadCatalog(cmd.Context(), databaseURL); err != nil {
					return err
				}
			}
			out, diffs, err := debezium.Import(filepath.Base(args[0]), data, opts)
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
	cmd.Flags().StringVar(&workerFile, "worker", "", "the Kafka Connect worker that runs the connector, where key.converter and "+
		"value.converter are usually set: its properties file (connect-distributed.properties), a Strimzi KafkaConnect (YAML), "+
		"or an environment file of Debezium's connect image (KEY_CONVERTER, VALUE_CONVERTER, CONNECT_* variables)")
	cmd.Flags().StringVar(&keyConverter, "key-converter", "", "the worker's key converter, as walrelay's key-converter: string, json, bytearray, "+
		"or Confluent's avro, protobuf or json-schema, whose registry options are --worker's (instead of --worker's converter)")
	cmd.Flags().StringVar(&valueConverter, "value-converter", "", "the worker's value converter, as walrelay's value-converter: string, json, "+
		"bytearray, or Confluent's avro, protobuf or json-schema, whose registry options are --worker's (instead of --worker's converter)")
	cmd.Flags().BoolVar(&keySchemas, "key-converter-schemas-enable", true, "with --key-converter json: the worker's key.converter.schemas.enable")
	cmd.Flags().BoolVar(&valueSchemas, "value-converter-schemas-enable", true, "with --value-converter json: the worker's value.converter.schemas.enable")
	cmd.Flags().StringVar(&databaseURL, "database-url", "", "the outbox database: its tables resolve the regular expressions "+
		"of table.include.list (without it such an entry is a difference), its column types what ByteBufferConverter writes")
	cmd.Flags().BoolVar(&allowDifferences, "allow-differences", false, "write the YAML even where walrelay's records would differ "+
		"from Debezium's (each difference is a comment)")
	return cmd
}
