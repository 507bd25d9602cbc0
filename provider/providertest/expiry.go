package providertest

var expiryCases = []testCase{}
