"""What a plan predicts and costs: the forecast and its verification, rescale cost, stage capacity, the cores bound."""
