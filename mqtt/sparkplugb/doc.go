// Package sparkplugb holds the Go types of the Eclipse Tahu Sparkplug B
// payload (sparkplug_b.proto, copied unchanged from eclipse/tahu), generated
// with protoc and protoc-gen-go.
package sparkplugb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go_opt=Msparkplug_b.proto=github.com/stratadb/strata/mqtt/sparkplugb sparkplug_b.proto
