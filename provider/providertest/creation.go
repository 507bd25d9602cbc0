package providertest

var creationCases = []testCase{}
