package providertest

var adminCases = []testCase{}
