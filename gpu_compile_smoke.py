"""One-off GPU smoke of ember.compile (not committed)."""
import copy, numpy as np, ember, ember.nn as nn, ember.nn.functional as F
assert ember.cuda.is_available()
ember.manual_seed(0)
m = nn.Sequential(nn.Linear(64, 128), nn.LayerNorm(128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10)).to("cuda")
m2 = copy.deepcopy(m)
o1, o2 = ember.optim.Adam(m.parameters()), ember.optim.Adam(m2.parameters())
x = ember.randn(32, 64, device="cuda"); y = ember.randint(0, 10, (32,), device="cuda")
def step(model, opt):
    opt.zero_grad(); l = F.cross_entropy(model(x), y); l.backward(); opt.step(); return l
c = ember.compile(step)
worst = 0.0
for i in range(5):
    ember.manual_seed(i); a = c(m, o1); ember.manual_seed(i); b = step(m2, o2)
    worst = max(worst, abs(float(a) - float(b)))
e = c.cache[list(c.cache)[0]][0]
print("compiled Adam step on cuda: losses max diff", worst, c.stats, "form", e.program.form if e.program else e.breaks)
print("weights max diff", np.abs(m[0].weight.detach().cpu().numpy() - m2[0].weight.detach().cpu().numpy()).max())
mha = nn.MultiheadAttention(16, 2, batch_first=True).to("cuda"); q = ember.randn(2, 5, 16, device="cuda")
mask = ember.ones(5, 5, dtype=ember.bool, device="cuda").triu(1)
cm = ember.compile(lambda q: mha(q, q, q, attn_mask=mask)[0])
r1 = cm(q); r2 = cm(q); r3 = mha(q, q, q, attn_mask=mask)[0]
print("mha masked on cuda compiled vs eager", float((r2 - r3).abs().max()), cm.stats)
