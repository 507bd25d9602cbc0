package providertest

var deletionCases = []testCase{}
