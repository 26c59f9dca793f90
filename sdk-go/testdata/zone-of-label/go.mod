module example.invalid/berth/sdk-go/testdata/zone-of-label

go 1.26

require example.invalid/berth/sdk-go v0.0.0

replace example.invalid/berth/sdk-go => ../..
