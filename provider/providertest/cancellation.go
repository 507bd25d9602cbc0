package providertest

var cancellationCases = []testCase{}
