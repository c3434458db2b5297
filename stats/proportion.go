package stats

import "math"

// ProportionChange compares two proportions, such as a row's error ratio:
// baseHits of baseN against newHits of newN.
//
// The interval is Newcombe's hybrid score interval for the difference
// new − base (Newcombe 1998, method 10), built from each proportion's
// Wilson score interval: unlike the textbook Wald interval it stays inside
// [−1, 1] and keeps its coverage when a proportion is 0 or near it, which an
// error ratio usually is. When base is above 0, Rel = (new−base)/base and CI
// is the difference's interval divided by base, so it excludes 0 exactly
// when the difference's interval does; when base is 0, Rel and CI are the
// absolute difference (Absolute, Note). P is the two-sided pooled
// two-proportion z-test. A count of 0 trials gives NaN figures.
func ProportionChange(baseHits, baseN, newHits, newN int, level float64) Change {
	lv, ok := levelOf(level)
	p1, p2 := ratio(baseHits, baseN), ratio(newHits, newN)
	if !ok || baseN <= 0 || newN <= 0 || baseHits < 0 || newHits < 0 || baseHits > baseN || newHits > newN {
		return nanChange(p1, p2, lv)
	}
	z := normalQuantile((1 + lv) / 2)
	l1, u1 := wilson(baseHits, baseN, z)
	l2, u2 := wilson(newHits, newN, z)
	d := p2 - p1
	lower := d - math.Sqrt((p2-l2)*(p2-l2)+(u1-p1)*(u1-p1))
	upper := d + math.Sqrt((u2-p2)*(u2-p2)+(p1-l1)*(p1-l1))
	c := Change{Base: p1, New: p2}
	c.setRel()
	if c.Absolute {
		c.CI = Interval{Lower: lower, Upper: upper, Level: lv}
	} else {
		c.CI = Interval{Lower: lower / p1, Upper: upper / p1, Level: lv}
	}
	pooled := float64(baseHits+newHits) / float64(baseN+newN)
	se := math.Sqrt(pooled * (1 - pooled) * (1/float64(baseN) + 1/float64(newN)))
	if se == 0 {
		c.P = 1 // both all hits or both none: nothing to tell apart
	} else {
		c.P = math.Erfc(math.Abs(d) / se / math.Sqrt2)
	}
	return c
}

func ratio(hits, n int) float64 {
	if n <= 0 {
		return math.NaN()
	}
	return float64(hits) / float64(n)
}

// wilson is the Wilson score interval for hits/n at the normal quantile z.
func wilson(hits, n int, z float64) (lower, upper float64) {
	p, nf := float64(hits)/float64(n), float64(n)
	z2 := z * z
	centre := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z / (1 + z2/nf) * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return max(0, centre-half), min(1, centre+half)
}

// normalQuantile is the standard normal distribution's p-quantile.
func normalQuantile(p float64) float64 { return -math.Sqrt2 * math.Erfcinv(2*p) }
