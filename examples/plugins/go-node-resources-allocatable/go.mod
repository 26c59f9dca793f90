module example.invalid/berth/examples/node-resources-allocatable

go 1.26

require example.invalid/berth/sdk-go v0.0.0

replace example.invalid/berth/sdk-go => ../../../sdk-go
