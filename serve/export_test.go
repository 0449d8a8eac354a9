package serve

// HeapGrowth is heapGrowth, for the benchmarks of package serve_test.
var HeapGrowth = heapGrowth
