module github.com/stratadb/strata/server

go 1.26.0

replace github.com/stratadb/strata => ../
