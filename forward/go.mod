module github.com/stratadb/strata/forward

go 1.26.0

replace github.com/stratadb/strata => ../

require (
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/klauspost/compress v1.20.4
	github.com/stratadb/strata v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/bits-and-blooms/bitset v1.24.2 // indirect
	github.com/bits-and-blooms/bloom/v3 v3.7.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gofrs/flock v0.8.1 // indirect
	github.com/influxdata/line-protocol/v2 v2.2.1 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
)
