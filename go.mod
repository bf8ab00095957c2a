module github.com/stratadb/strata

go 1.26.0

require (
	github.com/bits-and-blooms/bloom/v3 v3.7.1
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/gofrs/flock v0.8.1
	github.com/influxdata/line-protocol/v2 v2.2.1
	github.com/klauspost/compress v1.20.4
)

require (
	github.com/bits-and-blooms/bitset v1.24.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
