module github.com/stratadb/strata/forward

go 1.26.0

replace github.com/stratadb/strata => ../
