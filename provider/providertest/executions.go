package providertest

var executionCases = []testCase{}
