package awssign

// Regional is Service.regional, for its table test.
func (s Service) Regional(region string) string { return s.regional(region) }
