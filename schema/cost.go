package schema

import (
	"math"

	"github.com/infermatrix/infermatrix/metrics"
)

// cost resolves the cost section: the server's price per hour and its GPU
// count. The count is the hardware's when the file gives it, else the
// built-in server's replicas (one GPU each), else 1; the plan records
// which, so a per-GPU figure says what it divided by.
func (r *resolver) cost(plan *Plan) CostPlan {
	p := CostPlan{GPUs: 1, GPUsFrom: "default"}
	switch hw := plan.Server.Hardware; {
	case hw.Count > 0:
		p.GPUs, p.GPUsFrom = hw.Count, "server.hardware.count"
	case plan.Server.Builtin && plan.Server.Sim.Replicas > 0:
		p.GPUs, p.GPUsFrom = plan.Server.Sim.Replicas, "server.sim.replicas"
	}
	in := r.exp.Cost
	if in == nil {
		return p
	}
	const hint = "give one of usd_per_gpu_hour and usd_per_node_hour, e.g. cost: {usd_per_gpu_hour: 2.5}"
	price := func(key string, v *float64) (float64, bool) {
		if v == nil {
			return 0, false
		}
		if !(*v > 0) || math.IsInf(*v, 0) {
			r.problem(key, "give a price above 0 in US dollars, e.g. 2.5", "price %v is not a positive number", *v)
			return 0, false
		}
		return *v, true
	}
	gpu, okGPU := price("cost.usd_per_gpu_hour", in.USDPerGPUHour)
	node, okNode := price("cost.usd_per_node_hour", in.USDPerNodeHour)
	switch {
	case in.USDPerGPUHour != nil && in.USDPerNodeHour != nil:
		r.problem("cost.usd_per_node_hour", hint, "cost gives both a GPU-hour and a node-hour price")
	case in.USDPerGPUHour == nil && in.USDPerNodeHour == nil:
		r.problem("cost", hint, "cost gives no price")
	case okGPU:
		p.USDPerHour = gpu * float64(p.GPUs)
	case okNode:
		p.USDPerHour = node
	}
	return p
}

// costUnset refuses rules and hypotheses that read cost.* when the file
// sets no price: every cost figure would be missing, so they could never
// be judged. Throughput per GPU needs no price and stays readable.
func (r *resolver) costUnset(plan *Plan) {
	if plan.Cost.USDPerHour > 0 || r.exp.Cost != nil {
		return
	}
	const hint = "add cost: {usd_per_gpu_hour: N} (or usd_per_node_hour) to the file, or remove the rule's cost.* figures"
	r.eachExpect(func(path, src string) {
		r.useProblems(path, src, hint, metrics.CostUses, "reads the row's cost (%s), but the file sets no price")
	})
}
