// The benchmark harness and its tools, a module of its own so that the product's
// module neither builds nor tests any of it. It reaches the product through the
// replace below, and, its path lying under the product's, may import the product's
// internal packages: internal/pgcluster, the throwaway cluster the tests start too.
module github.com/walrelay/walrelay/bench

go 1.26.8

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	github.com/walrelay/walrelay v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.50.0
)

require (
	github.com/go-viper/mapstructure/v2 v2.5.0 // indirect
	github.com/hamba/avro/v2 v2.31.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

replace github.com/walrelay/walrelay => ../
