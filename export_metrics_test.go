package duroxide

// BuildInfoOf exposes buildInfoOf to the tests of package duroxide_test.
var BuildInfoOf = buildInfoOf
