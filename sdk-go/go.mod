module example.invalid/berth/sdk-go

go 1.26
