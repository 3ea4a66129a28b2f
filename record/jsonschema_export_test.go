package record

// JavaHashOrder is javaHashOrder, for the external tests.
var JavaHashOrder = javaHashOrder
